// spawn: start N goroutines that each do a trivial piece of work, join them with a
// WaitGroup. Reports wall-clock nanoseconds per goroutine (spawn + run + join).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	n := 1000000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	var sum int64
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func(v int64) {
			atomic.AddInt64(&sum, v)
			wg.Done()
		}(int64(i))
	}
	wg.Wait()
	elapsed := time.Since(start)
	if want := int64(n) * int64(n-1) / 2; atomic.LoadInt64(&sum) != want {
		fmt.Fprintf(os.Stderr, "spawn: wrong sum %d, want %d\n", sum, want)
		os.Exit(1)
	}
	fmt.Printf("RESULT name=spawn procs=%d unit=ns_per_g value=%.1f n=%d total_ms=%.1f\n",
		runtime.GOMAXPROCS(0), float64(elapsed.Nanoseconds())/float64(n), n,
		float64(elapsed.Nanoseconds())/1e6)
}
