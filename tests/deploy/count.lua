-- wrk script for the deployment tests: counts, per thread, the 2xx responses to the
-- requests the replicas count (GET $WRK_PATH, default /plaintext) apart from those to
-- GET /healthz, which goro::App answers ahead of the handler, uncounted. From the epoch
-- second $WRK_STOP_AT on (if set) only /healthz is asked: every counted request has then
-- been answered before wrk stops, and the counts can be held against the servers' own.
-- Prints "counted N", "probes N" and "failed N" (non-2xx) at the end.
local path = os.getenv("WRK_PATH") or "/plaintext"
local stop_at = tonumber(os.getenv("WRK_STOP_AT") or "0")
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  counted, probes, failed = 0, 0, 0
end

function request()
  if stop_at > 0 and os.time() >= stop_at then
    return wrk.format("GET", "/healthz")
  end
  return wrk.format("GET", path)
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    failed = failed + 1
  elseif body == "ok\n" then
    probes = probes + 1
  else
    counted = counted + 1
  end
end

function done(summary, latency, requests)
  local c, p, f = 0, 0, 0
  for _, t in ipairs(threads) do
    c = c + t:get("counted")
    p = p + t:get("probes")
    f = f + t:get("failed")
  end
  io.write(string.format("counted %d\nprobes %d\nfailed %d\n", c, p, f))
  local e = summary.errors
  io.write(string.format("errors connect %d read %d write %d status %d timeout %d\n",
                         e.connect, e.read, e.write, e.status, e.timeout))
end
