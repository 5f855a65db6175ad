// The Go peer of loadtest/data: GET /cache/{key} answers the value of the Redis key,
// read with redigo from a pool of -pool connections (MaxActive, Wait), 404 when there
// is no such key, 502 when Redis fails. Built offline in GOPATH mode from Debian's
// golang-github-gomodule-redigo-dev.
package main

import (
	"flag"
	"log"
	"net/http"
	"strings"

	"github.com/gomodule/redigo/redis"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis address, or unix:PATH")
	size := flag.Int("pool", 16, "Redis connections at most")
	flag.Parse()

	network, address := "tcp", *redisAddr
	if strings.HasPrefix(address, "unix:") {
		network, address = "unix", strings.TrimPrefix(address, "unix:")
	}
	pool := &redis.Pool{
		MaxIdle:   *size,
		MaxActive: *size,
		Wait:      true,
		Dial:      func() (redis.Conn, error) { return redis.Dial(network, address) },
	}

	http.HandleFunc("/cache/", func(w http.ResponseWriter, r *http.Request) {
		conn, err := pool.GetContext(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer conn.Close()
		value, err := redis.Bytes(conn.Do("GET", strings.TrimPrefix(r.URL.Path, "/cache/")))
		if err == redis.ErrNil {
			http.Error(w, "no such key", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(value)
	})
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	log.Fatal(http.ListenAndServe(*addr, nil))
}
