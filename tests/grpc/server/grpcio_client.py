#!/usr/bin/python3
"""Calls goro.test.Echo (echo_service.hpp) and the built-in services of a goro::grpc
server with python3-grpcio, through generic calls on raw bytes (no generated code): the
messages are encoded here by hand. Prints "PASS <case>" or "FAIL <case>: <why>" for each
case and exits 1 if any failed.

    grpcio_client.py <port> [case ...]
"""
import os
import queue
import sys
import threading
import time

import grpc


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_bytes(num, data):
    return varint(num << 3 | 2) + varint(len(data)) + data


def field_int(num, v):
    return varint(num << 3) + varint(v) if v else b""


def echo_request(text="", count=0, sleep_ms=0, status_code=0, status_message="",
                 compress=False, payload=b""):
    out = b""
    if text:
        out += field_bytes(1, text.encode())
    out += field_int(2, count) + field_int(3, sleep_ms) + field_int(4, status_code)
    if status_message:
        out += field_bytes(5, status_message.encode())
    out += field_int(6, 1 if compress else 0)
    if payload:
        out += field_bytes(7, payload)
    return out


def parse(data):
    """{field number: [values]} of a message: ints for varints, bytes for the rest."""
    fields, i = {}, 0
    while i < len(data):
        key, i = read_varint(data, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = read_varint(data, i)
        elif wire == 2:
            n, i = read_varint(data, i)
            v, i = data[i:i + n], i + n
        else:
            raise ValueError("unexpected wire type %d" % wire)
        fields.setdefault(num, []).append(v)
    return fields


def read_varint(data, i):
    shift = n = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def reply(data):
    f = parse(data)
    return (f.get(1, [b""])[0].decode(), f.get(2, [0])[0], f.get(3, [b""])[0])


class Client:
    """A channel to the server; over TLS when GORO_GRPC_TLS_CA names the CA's PEM file
    (the server's certificate is for "localhost")."""

    def __init__(self, port, **kwargs):
        ca = os.environ.get("GORO_GRPC_TLS_CA")
        if ca:
            with open(ca, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self.channel = grpc.secure_channel(
                "127.0.0.1:%d" % port, creds,
                options=[("grpc.ssl_target_name_override", "localhost")], **kwargs)
        else:
            self.channel = grpc.insecure_channel("127.0.0.1:%d" % port, **kwargs)

    def unary(self, method, request, **kw):
        return self.channel.unary_unary(method)(request, **kw)

    def with_call(self, method, request, **kw):
        return self.channel.unary_unary(method).with_call(request, **kw)

    def server_stream(self, method, request, **kw):
        return self.channel.unary_stream(method)(request, **kw)

    def client_stream(self, method, requests, **kw):
        return self.channel.stream_unary(method)(requests, **kw)

    def bidi(self, method, requests, **kw):
        return self.channel.stream_stream(method)(requests, **kw)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_code(fn, code, contains=None):
    try:
        fn()
    except grpc.RpcError as e:
        expect(e.code() == code, "status %s (%r), want %s" % (e.code(), e.details(), code))
        if contains is not None:
            expect(contains in (e.details() or ""), "details %r lack %r" % (e.details(), contains))
        return e
    raise AssertionError("no error, want %s" % code)


E = "/goro.test.Echo/"


def case_unary(c):
    text, index, _ = reply(c.unary(E + "Unary", echo_request("hello", payload=b"abc")))
    expect((text, index) == ("hello", 3), "reply %r" % ((text, index),))
    # An empty request is a valid message too.
    expect(reply(c.unary(E + "Unary", b"")) == ("", 0, b""), "empty")


def case_server_stream(c):
    got = [reply(m)[:2] for m in c.server_stream(E + "ServerStream", echo_request("s", count=5))]
    expect(got == [("s", i) for i in range(5)], "got %r" % got)
    expect(list(c.server_stream(E + "ServerStream", echo_request("s", count=0))) == [], "empty stream")
    # Headers sent on their own before any message (send_initial_metadata), then a stream
    # with no message: the trailers alone end it.
    call = c.server_stream(E + "ServerStream", echo_request("s", count=0), metadata=(("x-echo", "early"),))
    expect(("x-echo-initial", "early") in call.initial_metadata(), "early headers %r" % (call.initial_metadata(),))
    expect(list(call) == [] and call.code() == grpc.StatusCode.OK, "empty stream after headers")


def case_client_stream(c):
    text, index, _ = reply(c.client_stream(E + "ClientStream",
                                           iter([echo_request(t) for t in ("a", "b", "c")])))
    expect((text, index) == ("abc", 3), "reply %r" % ((text, index),))
    text, index, _ = reply(c.client_stream(E + "ClientStream", iter([])))
    expect((text, index) == ("", 0), "empty: %r" % ((text, index),))


def case_bidi_ping_pong(c):
    # Each request is sent only after the answer to the one before came: the server must
    # read and write the same call from two goroutines.
    answers = queue.Queue()

    def requests():
        for i in range(20):
            yield echo_request("m%d" % i)
            answers.get(timeout=5)

    got = []
    for m in c.bidi(E + "Bidi", requests(), timeout=10):
        got.append(reply(m)[:2])
        answers.put(1)
    expect(got == [("m%d" % i, i) for i in range(20)], "got %r" % got)

    # Replies larger than the flow-control window: the server's writer parks for room
    # while its reader parks for the next request; each must get its own wake-up.
    answers = queue.Queue()

    def big_requests():
        for i in range(10):
            yield echo_request("b%d" % i, count=300000)
            answers.get(timeout=5)

    sizes = []
    for m in c.bidi(E + "Bidi", big_requests(), timeout=20):
        sizes.append(len(reply(m)[2]))
        answers.put(1)
    expect(sizes == [300000] * 10, "big replies %r" % sizes)


def case_deadline(c):
    before = reply(c.unary(E + "Cancelled", b""))[1]
    expect_code(lambda: c.unary(E + "Unary", echo_request(sleep_ms=3000), timeout=0.2),
                grpc.StatusCode.DEADLINE_EXCEEDED)
    # The server's context ended too (its deadline, or the client's RST_STREAM).
    for _ in range(100):
        if reply(c.unary(E + "Cancelled", b""))[1] > before:
            break
        time.sleep(0.02)
    else:
        raise AssertionError("the handler's context was not cancelled")
    _, call = c.with_call(E + "Unary", echo_request("d"), timeout=5)
    expect(("x-has-deadline", "1") in call.initial_metadata(), "no deadline seen by the handler")
    _, call = c.with_call(E + "Unary", echo_request("d"))
    expect(("x-has-deadline", "1") not in call.initial_metadata(), "a deadline without grpc-timeout")


def case_cancel(c):
    before = reply(c.unary(E + "Cancelled", b""))[1]
    call = c.server_stream(E + "ServerStream", echo_request("x", count=1000, sleep_ms=20))
    it = iter(call)
    next(it)
    next(it)
    call.cancel()
    for _ in range(100):
        if reply(c.unary(E + "Cancelled", b""))[1] > before:
            return
        time.sleep(0.02)
    raise AssertionError("the server did not see the cancellation")


def case_metadata(c):
    data = b"\x00\x01\xfe\xff"
    _, call = c.with_call(E + "Unary", echo_request("m"),
                          metadata=(("x-echo", "hi there"), ("x-data-bin", data)))
    initial, trailing = dict(call.initial_metadata()), dict(call.trailing_metadata())
    expect(initial.get("x-echo-initial") == "hi there", "initial %r" % initial)
    expect(initial.get("x-intercepted") == "yes", "interceptor value missing: %r" % initial)
    expect(trailing.get("x-data-trailing-bin") == data, "trailing %r" % trailing)


def case_status(c):
    message = "not here: ünïcode 100% \n sure"
    e = expect_code(lambda: c.unary(E + "Unary", echo_request(status_code=5, status_message=message)),
                    grpc.StatusCode.NOT_FOUND)
    expect(e.details() == message, "message %r" % e.details())
    trailing = dict(e.trailing_metadata())
    expect(trailing.get("grpc-status-details-bin") == b"details\x00\xff" + message.encode(),
           "details %r" % trailing.get("grpc-status-details-bin"))
    # After messages went out, the status comes in trailers.
    it = c.server_stream(E + "ServerStream", echo_request("s", count=2, status_code=9,
                                                          status_message="late"))
    got = []
    try:
        for m in it:
            got.append(m)
        raise AssertionError("no error")
    except grpc.RpcError as err:
        expect(err.code() == grpc.StatusCode.FAILED_PRECONDITION and err.details() == "late",
               "status %s %r" % (err.code(), err.details()))
    expect(len(got) == 2, "messages %d" % len(got))


def case_gzip(c, port):
    gz = Client(port, compression=grpc.Compression.Gzip)
    big = b"z" * 100000
    text, index, _ = reply(gz.unary(E + "Unary", echo_request("gz", payload=big)))
    expect((text, index) == ("gz", len(big)), "gzip request: %r" % ((text, index),))
    text, _, payload = reply(c.unary(E + "Unary", echo_request("gz", count=50000, compress=True)))
    expect(text == "gz" and payload == b"p" * 50000, "gzip response")
    got = [reply(m)[1] for m in gz.server_stream(E + "ServerStream",
                                                  echo_request("s", count=3, compress=True))]
    expect(got == [0, 1, 2], "gzip stream %r" % got)


def case_max_size(c):
    # The server takes at most 1 MiB and sends at most 1 MiB (server_test.cpp).
    expect_code(lambda: c.unary(E + "Unary", echo_request(payload=b"x" * (2 << 20))),
                grpc.StatusCode.RESOURCE_EXHAUSTED)
    expect_code(lambda: c.unary(E + "Unary", echo_request(count=2 << 20)),
                grpc.StatusCode.RESOURCE_EXHAUSTED)
    text, index, _ = reply(c.unary(E + "Unary", echo_request("ok", payload=b"x" * 1000)))
    expect(index == 1000, "small message after large")


def case_unimplemented(c):
    expect_code(lambda: c.unary(E + "Nope", b""), grpc.StatusCode.UNIMPLEMENTED, "Nope")
    expect_code(lambda: c.unary("/goro.test.Nope/Unary", b""), grpc.StatusCode.UNIMPLEMENTED,
                "goro.test.Nope")


def case_throw(c):
    expect_code(lambda: c.unary(E + "Throw", echo_request("x")), grpc.StatusCode.UNKNOWN, "boom: x")


def case_malformed_request(c):
    # Field 1 declared 100 bytes long with 1 present: protobuf cannot parse it.
    expect_code(lambda: c.unary(E + "Unary", b"\x0a\x64a"), grpc.StatusCode.INTERNAL)


HEALTH = "/grpc.health.v1.Health/"


def case_health(c):
    status = lambda data: parse(data).get(1, [0])[0]
    expect(status(c.unary(HEALTH + "Check", b"")) == 1, "'' not SERVING")
    expect(status(c.unary(HEALTH + "Check", field_bytes(1, b"goro.test.Echo"))) == 1, "Echo")
    expect_code(lambda: c.unary(HEALTH + "Check", field_bytes(1, b"nope")), grpc.StatusCode.NOT_FOUND)
    watch = c.server_stream(HEALTH + "Watch", b"")
    expect(status(next(iter(watch))) == 1, "Watch: not SERVING")
    watch.cancel()
    unknown = c.server_stream(HEALTH + "Watch", field_bytes(1, b"nope"))
    expect(status(next(iter(unknown))) == 3, "Watch of an unknown service: not SERVICE_UNKNOWN")
    unknown.cancel()


def case_reflection(c):
    for version in ("v1alpha", "v1"):
        method = "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % version
        requests = [field_bytes(7, b"*"), field_bytes(4, b"goro.test.Echo"),
                    field_bytes(3, b"grpc/health/v1/health.proto"), field_bytes(4, b"no.Such")]
        answers = [parse(m) for m in c.bidi(method, iter(requests), timeout=5)]
        expect(len(answers) == 4, "%s: %d answers" % (version, len(answers)))
        names = sorted(parse(s)[1][0].decode() for s in parse(answers[0][6][0])[1])
        for want in ("goro.test.Echo", "grpc.health.v1.Health",
                     "grpc.reflection.v1alpha.ServerReflection"):
            expect(want in names, "%s: list_services %r" % (version, names))
        files = parse(answers[1][4][0])[1]
        expect(any(b"goro/test/echo.proto" in f for f in files), "%s: symbol's file" % version)
        expect(any(b"grpc.health.v1" in f for f in parse(answers[2][4][0])[1]), "by filename")
        expect(7 in answers[3], "%s: unknown symbol answered without error_response" % version)


def case_concurrent(c):
    errors = []

    def worker(n):
        try:
            for i in range(50):
                text = "w%d-%d" % (n, i)
                if reply(c.unary(E + "Unary", echo_request(text)))[0] != text:
                    errors.append(text)
        except Exception as e:  # noqa: BLE001 - reported as the case's failure
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expect(not errors, "errors %r" % errors[:3])


CASES = {
    "unary": case_unary,
    "server_stream": case_server_stream,
    "client_stream": case_client_stream,
    "bidi_ping_pong": case_bidi_ping_pong,
    "deadline": case_deadline,
    "cancel": case_cancel,
    "metadata": case_metadata,
    "status": case_status,
    "gzip": None,
    "max_size": case_max_size,
    "unimplemented": case_unimplemented,
    "throw": case_throw,
    "malformed_request": case_malformed_request,
    "health": case_health,
    "reflection": case_reflection,
    "concurrent": case_concurrent,
}


def main():
    port = int(sys.argv[1])
    names = sys.argv[2:] or list(CASES)
    c = Client(port)
    failed = 0
    for name in names:
        try:
            if name == "gzip":
                case_gzip(c, port)
            else:
                CASES[name](c)
            print("PASS", name, flush=True)
        except Exception as e:  # noqa: BLE001 - any failure is the case's
            failed += 1
            print("FAIL %s: %r" % (name, e), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
