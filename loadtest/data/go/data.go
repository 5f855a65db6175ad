// The Go peer of loadtest/data (run.sh):
//   GET /cache/{key}  one Redis GET (redigo's Pool, -pool connections, MaxActive + Wait);
//   GET /note/{id}    one indexed SELECT on PostgreSQL (pgx v4's pgxpool, -pg-pool
//                     connections) and one Redis GET, answered together (with -pg).
// 404 for a key that is not there, 502 when a server fails. Built offline in GOPATH mode
// from Debian's golang-github-gomodule-redigo-dev and golang-github-jackc-pgx-v4-dev.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"strings"

	"github.com/gomodule/redigo/redis"
	"github.com/jackc/pgx/v4/pgxpool"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis address, or unix:PATH")
	size := flag.Int("pool", 16, "Redis connections at most")
	pgConn := flag.String("pg", "", "PostgreSQL connection string (none: no /note)")
	pgSize := flag.Int("pg-pool", 16, "PostgreSQL connections at most")
	flag.Parse()

	network, address := "tcp", *redisAddr
	if strings.HasPrefix(address, "unix:") {
		network, address = "unix", strings.TrimPrefix(address, "unix:")
	}
	cache := &redis.Pool{
		MaxIdle:   *size,
		MaxActive: *size,
		Wait:      true,
		Dial:      func() (redis.Conn, error) { return redis.Dial(network, address) },
	}
	get := func(ctx context.Context, key string) ([]byte, error) {
		conn, err := cache.GetContext(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return redis.Bytes(conn.Do("GET", key))
	}

	http.HandleFunc("/cache/", func(w http.ResponseWriter, r *http.Request) {
		value, err := get(r.Context(), strings.TrimPrefix(r.URL.Path, "/cache/"))
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

	if *pgConn != "" {
		config, err := pgxpool.ParseConfig(*pgConn)
		if err != nil {
			log.Fatal(err)
		}
		config.MaxConns = int32(*pgSize)
		db, err := pgxpool.ConnectConfig(context.Background(), config)
		if err != nil {
			log.Fatal(err)
		}
		http.HandleFunc("/note/", func(w http.ResponseWriter, r *http.Request) {
			id, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/note/"))
			if err != nil {
				http.Error(w, "bad id", http.StatusBadRequest)
				return
			}
			var title string
			err = db.QueryRow(r.Context(), "SELECT title FROM notes WHERE id = $1", id).Scan(&title)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			views, err := get(r.Context(), "views:"+strconv.Itoa(id))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintf(w, "%s: %s views\n", title, views)
		})
	}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	log.Fatal(http.ListenAndServe(*addr, nil))
}
