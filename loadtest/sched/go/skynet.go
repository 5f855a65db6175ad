// skynet: the classic benchmark (github.com/atemerev/skynet). One goroutine spawns 10
// children, each spawns 10, ... down to 1,000,000 leaves; each leaf sends its number
// to its parent over an unbuffered channel, each internal node sends the sum of its
// children. Reports the total wall-clock time in milliseconds.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

func skynet(c chan<- int64, num int64, size int64, div int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64)
	var sum int64
	for i := int64(0); i < div; i++ {
		subNum := num + i*(size/div)
		go skynet(rc, subNum, size/div, div)
	}
	for i := int64(0); i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func main() {
	size := int64(1000000)
	if len(os.Args) > 1 {
		v, _ := strconv.Atoi(os.Args[1])
		size = int64(v)
	}
	start := time.Now()
	c := make(chan int64)
	go skynet(c, 0, size, 10)
	sum := <-c
	elapsed := time.Since(start)
	if want := size * (size - 1) / 2; sum != want {
		fmt.Fprintf(os.Stderr, "skynet: got %d, want %d\n", sum, want)
		os.Exit(1)
	}
	fmt.Printf("RESULT name=skynet procs=%d unit=ms value=%.1f leaves=%d\n",
		runtime.GOMAXPROCS(0), float64(elapsed.Nanoseconds())/1e6, size)
}
