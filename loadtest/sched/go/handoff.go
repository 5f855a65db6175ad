// handoff: 32 goroutines each repeatedly make a 10 ms blocking system call
// (syscall.Nanosleep, which Go runs under entersyscall, so sysmon can hand the P off)
// while one CPU-bound goroutine runs a plain loop for 1 s. With working hand-off the
// CPU goroutine keeps (almost) the whole P and the sleepers still complete ~100 calls
// each per second. Reports three lines:
//
//	handoff_cpu        loop iterations per second of the CPU goroutine (millions)
//	handoff_cpu_share  the same as a percentage of the rate it achieves alone
//	handoff_calls      10 ms calls completed by all sleepers during that second
package main

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const sleepers = 32

var sink uint64

// spin runs a plain loop (no runtime calls but reading the vDSO clock) for d and
// returns the number of iterations.
func spin(d time.Duration) int64 {
	deadline := time.Now().Add(d)
	var iters int64
	x := uint64(1)
	for {
		for i := 0; i < 4096; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		iters += 4096
		if !time.Now().Before(deadline) {
			break
		}
	}
	sink = x
	return iters
}

func main() {
	// The loop's rate alone is taken before and after the loaded second, so a drift
	// in the machine's load during the run cancels out of the share.
	soloDur := 250 * time.Millisecond
	loadDur := 1000 * time.Millisecond
	spinAlone := func() int64 {
		done := make(chan int64)
		go func() { done <- spin(soloDur) }()
		return <-done
	}

	solo := spinAlone()

	var stop int32
	var calls int64
	var wg sync.WaitGroup
	wg.Add(sleepers)
	for i := 0; i < sleepers; i++ {
		go func() {
			ts := syscall.Timespec{Nsec: 10 * 1000 * 1000}
			for atomic.LoadInt32(&stop) == 0 {
				syscall.Nanosleep(&ts, nil)
				atomic.AddInt64(&calls, 1)
			}
			wg.Done()
		}()
	}
	type result struct {
		iters int64
		calls int64
	}
	done := make(chan result)
	go func() {
		c0 := atomic.LoadInt64(&calls)
		it := spin(loadDur)
		c1 := atomic.LoadInt64(&calls)
		atomic.StoreInt32(&stop, 1)
		done <- result{it, c1 - c0}
	}()
	r := <-done
	wg.Wait()
	solo += spinAlone()
	soloRate := float64(solo) / (2 * soloDur.Seconds())
	rate := float64(r.iters) / loadDur.Seconds()
	procs := runtime.GOMAXPROCS(0)
	fmt.Printf("RESULT name=handoff_cpu procs=%d unit=Miter_per_s value=%.1f solo_miter_per_s=%.1f\n",
		procs, rate/1e6, soloRate/1e6)
	fmt.Printf("RESULT name=handoff_cpu_share procs=%d unit=pct_of_solo value=%.1f\n",
		procs, 100*rate/soloRate)
	fmt.Printf("RESULT name=handoff_calls procs=%d unit=calls_in_1s value=%d ideal=%d\n",
		procs, r.calls, sleepers*100)
}
