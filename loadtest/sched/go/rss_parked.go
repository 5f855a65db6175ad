// rss_parked: start N goroutines that each block receiving from one channel; once all
// are parked, compare the process RSS with the RSS before they were started. Reports
// KiB of resident memory per parked goroutine (rss_parked), then closes the channel
// and reports the time per goroutine until all have woken and finished
// (release_parked).
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

func rssKiB() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		panic(err)
	}
	var size, resident int64
	fmt.Sscan(string(data), &size, &resident)
	return resident * int64(os.Getpagesize()) / 1024
}

func main() {
	n := 100000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	release := make(chan struct{})
	var started int64
	var wg sync.WaitGroup
	runtime.GC()
	before := rssKiB()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			atomic.AddInt64(&started, 1)
			<-release
			wg.Done()
		}()
	}
	for atomic.LoadInt64(&started) != int64(n) {
		time.Sleep(time.Millisecond)
	}
	// The last goroutines counted may still be on their way into the receive.
	time.Sleep(50 * time.Millisecond)
	after := rssKiB()
	t0 := time.Now()
	close(release)
	wg.Wait()
	releaseMs := float64(time.Since(t0).Nanoseconds()) / 1e6
	procs := runtime.GOMAXPROCS(0)
	fmt.Printf("RESULT name=rss_parked procs=%d unit=KiB_per_g value=%.2f n=%d rss_before_kib=%d rss_after_kib=%d\n",
		procs, float64(after-before)/float64(n), n, before, after)
	fmt.Printf("RESULT name=release_parked procs=%d unit=ns_per_g value=%.1f n=%d\n",
		procs, releaseMs*1e6/float64(n), n)
}
