-- Put in front of every wrk script of loadtest/run.sh: once the run is over, one line
-- the kit parses (latencies in microseconds, errors by kind; status = non-2xx/3xx).
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT requests=%d duration_us=%d p50_us=%.0f p99_us=%.0f max_us=%.0f"
    .. " connect=%d read=%d write=%d timeout=%d status=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.max, e.connect, e.read, e.write, e.timeout, e.status))
end
-- HTTP/1.1 pipelining: 16 GET requests of the URL's path in each write (as TechEmpower's
-- pipeline.lua). wrk counts the 16 requests in the buffer and expects 16 responses.
init = function(args)
  local r = {}
  for i = 1, 16 do
    r[i] = wrk.format()
  end
  pipelined = table.concat(r)
end

request = function()
  return pipelined
end
