// Echo server in Go (standard library only): one goroutine per connection.
//   echo [address]      (default 127.0.0.1:9000; Ps from GOMAXPROCS)
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
)

func main() {
	addr := "127.0.0.1:9000"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "go echo on %s with %d Ps\n", ln.Addr(), runtime.GOMAXPROCS(0))
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "accept:", err)
			os.Exit(1)
		}
		go func(c net.Conn) {
			defer c.Close()
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if err != nil || n == 0 {
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}(c)
	}
}
