// yield: two goroutines each call runtime.Gosched() N times. Reports wall-clock
// nanoseconds per yield over all 2N yields. With one P every yield is a switch to the
// other goroutine; with more Ps the two may run in parallel, so the figure is then
// the aggregate cost of a yield that finds nothing else to run on its P.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

func main() {
	n := 1000000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(2)
	for k := 0; k < 2; k++ {
		go func() {
			for i := 0; i < n; i++ {
				runtime.Gosched()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	fmt.Printf("RESULT name=yield procs=%d unit=ns_per_yield value=%.1f n=%d total_ms=%.1f\n",
		runtime.GOMAXPROCS(0), float64(elapsed.Nanoseconds())/float64(2*n), n,
		float64(elapsed.Nanoseconds())/1e6)
}
