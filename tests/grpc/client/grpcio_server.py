#!/usr/bin/python3
"""goro.test.client.v1.Echo served by python3-grpcio, for grpcio_test.cpp.

Usage: grpcio_server.py PROTO_DIR. Generates the Python stubs of
goro/test/client/echo.proto into a temporary folder (grpc_tools.protoc), serves Echo on
127.0.0.1 (an ephemeral port, h2c), prints "PORT PID" on one line, and serves until it is
sent SIGTERM or 60 seconds have passed.
"""
import os
import signal
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc
from grpc_tools import protoc


def generate(proto_dir, out_dir):
    import grpc_tools
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    for proto in ("goro/test/client/echo.proto", "goro/test/client/common/types.proto"):
        rc = protoc.main(["grpc_tools.protoc", "-I" + proto_dir, "-I" + well_known,
                          "--python_out=" + out_dir, "--grpc_python_out=" + out_dir, proto])
        if rc != 0:
            sys.exit("grpc_tools.protoc failed on " + proto)
    sys.path.insert(0, out_dir)


def code_of(number):
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return code
    return grpc.StatusCode.UNKNOWN


def main():
    out_dir = tempfile.mkdtemp(prefix="goro-grpcio-")
    generate(sys.argv[1], out_dir)
    from goro.test.client import echo_pb2, echo_pb2_grpc

    class Echo(echo_pb2_grpc.EchoServicer):
        def _finish(self, request, context):
            if request.status_code != 0:
                context.abort(code_of(request.status_code), request.status_message)

        def Unary(self, request, context):
            if request.delay_ms > 0:
                # Sleeps until the delay passes or the call ends (the client's deadline).
                ended = threading.Event()
                context.add_callback(ended.set)
                ended.wait(request.delay_ms / 1000.0)
            metadata = {k: (v if isinstance(v, bytes) else v.encode())
                        for k, v in context.invocation_metadata() if k.startswith("x-")}
            remaining = context.time_remaining()
            context.send_initial_metadata((("x-initial", "from-python"),))
            context.set_trailing_metadata((("x-trailing-bin", b"\x00\x01\xfe\xff"),))
            self._finish(request, context)
            return echo_pb2.EchoResponse(
                message=request.message, metadata=metadata, index=len(request.payload),
                payload=b"r" * request.response_size,
                deadline_ms=-1 if remaining is None or remaining > 1e9 else int(remaining * 1000))

        def ServerStream(self, request, context):
            for i in range(request.count):
                if request.delay_ms > 0:
                    time.sleep(request.delay_ms / 1000.0)
                yield echo_pb2.EchoResponse(message=request.message, index=i)
            self._finish(request, context)

        def ClientStream(self, request_iterator, context):
            parts = [r.message for r in request_iterator]
            return echo_pb2.EchoResponse(message="".join(parts), index=len(parts))

        def Bidi(self, request_iterator, context):
            for i, r in enumerate(request_iterator):
                yield echo_pb2.EchoResponse(message=r.message, index=i)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    echo_pb2_grpc.add_EchoServicer_to_server(Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(port, os.getpid(), flush=True)
    done.wait(60)
    server.stop(0)


if __name__ == "__main__":
    main()
