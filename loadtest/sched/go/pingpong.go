// pingpong: two goroutines bounce a value over two unbuffered channels N times.
// Reports wall-clock nanoseconds per round trip (two sends + two receives).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

func main() {
	n := 1000000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	ping := make(chan int)
	pong := make(chan int)
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(pong)
	}()
	start := time.Now()
	v := 0
	for i := 0; i < n; i++ {
		ping <- v
		v = <-pong
	}
	elapsed := time.Since(start)
	close(ping)
	<-pong
	if v != n {
		fmt.Fprintf(os.Stderr, "pingpong: got %d, want %d\n", v, n)
		os.Exit(1)
	}
	fmt.Printf("RESULT name=pingpong procs=%d unit=ns_per_roundtrip value=%.1f n=%d total_ms=%.1f\n",
		runtime.GOMAXPROCS(0), float64(elapsed.Nanoseconds())/float64(n), n,
		float64(elapsed.Nanoseconds())/1e6)
}
