// blocking_getpid: a short system call made under the runtime's syscall protocol,
// N times. syscall.Getpid() is a raw syscall in Go (no entersyscall/exitsyscall), so
// the measured call is syscall.Syscall(SYS_GETPID), which does enter and exit; the raw
// call is timed too, as the kernel floor. Reports nanoseconds per call for both
// (getpid_raw, blocking_getpid).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func main() {
	n := 1000000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	pid := uintptr(os.Getpid())

	start := time.Now()
	for i := 0; i < n; i++ {
		r, _, _ := syscall.RawSyscall(syscall.SYS_GETPID, 0, 0, 0)
		if r != pid {
			panic("getpid")
		}
	}
	raw := time.Since(start)

	start = time.Now()
	for i := 0; i < n; i++ {
		r, _, _ := syscall.Syscall(syscall.SYS_GETPID, 0, 0, 0)
		if r != pid {
			panic("getpid")
		}
	}
	elapsed := time.Since(start)
	procs := runtime.GOMAXPROCS(0)
	fmt.Printf("RESULT name=getpid_raw procs=%d unit=ns_per_call value=%.1f n=%d\n",
		procs, float64(raw.Nanoseconds())/float64(n), n)
	fmt.Printf("RESULT name=blocking_getpid procs=%d unit=ns_per_call value=%.1f n=%d\n",
		procs, float64(elapsed.Nanoseconds())/float64(n), n)
}
