#!/usr/bin/python3
"""The Python peer of goro's interop tests: grpc.testing.TestService on python3-grpcio.

Debian ships no interop programs, so this is ours, with the flags of grpc-go's interop
server (--port, --use_tls, --tls_cert_file, --tls_key_file). grpc/interop/run_interop.sh
generates the stubs (proto.grpc.testing.*_pb2) into a temporary folder with
`/usr/bin/python3 -m grpc_tools.protoc` and puts it on PYTHONPATH.

Behaviour follows the interop test descriptions (grpc/grpc doc/
interop-test-descriptions.md, "Server"): payloads of zero bytes of the requested sizes,
response_status becomes the call's status, x-grpc-test-echo-initial and
x-grpc-test-echo-trailing-bin are echoed in the headers and trailers, and the
Unimplemented* calls are left unimplemented.
"""

import argparse
import sys
import threading
import time
from concurrent import futures

import grpc

from proto.grpc.testing import empty_pb2, messages_pb2, test_pb2_grpc

ECHO_INITIAL_KEY = "x-grpc-test-echo-initial"
ECHO_TRAILING_KEY = "x-grpc-test-echo-trailing-bin"

CODES = {code.value[0]: code for code in grpc.StatusCode}


def zero_payload(size, context):
    if size < 0:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"negative payload size {size}")
    return messages_pb2.Payload(type=messages_pb2.COMPRESSABLE, body=bytes(size))


def echo_metadata(context):
    """Copies the echo keys of the client's metadata to the headers and trailers."""
    metadata = dict(context.invocation_metadata())
    if ECHO_INITIAL_KEY in metadata:
        context.send_initial_metadata(((ECHO_INITIAL_KEY, metadata[ECHO_INITIAL_KEY]),))
    if ECHO_TRAILING_KEY in metadata:
        context.set_trailing_metadata(((ECHO_TRAILING_KEY, metadata[ECHO_TRAILING_KEY]),))


def echo_status(request, context):
    """Ends the call with the request's response_status, if it asks for one."""
    if request.HasField("response_status") and request.response_status.code != 0:
        code = CODES.get(request.response_status.code, grpc.StatusCode.UNKNOWN)
        context.abort(code, request.response_status.message)


def responses(request, context):
    for params in request.response_parameters:
        if params.interval_us > 0:
            time.sleep(params.interval_us / 1e6)
        yield messages_pb2.StreamingOutputCallResponse(payload=zero_payload(params.size, context))


class TestService(test_pb2_grpc.TestServiceServicer):
    def EmptyCall(self, request, context):
        return empty_pb2.Empty()

    def UnaryCall(self, request, context):
        echo_metadata(context)
        echo_status(request, context)
        return messages_pb2.SimpleResponse(payload=zero_payload(request.response_size, context))

    def CacheableUnaryCall(self, request, context):
        context.send_initial_metadata((("cache-control", "max-age=60, public"),))
        body = str(time.time_ns()).encode()
        return messages_pb2.SimpleResponse(payload=messages_pb2.Payload(body=body))

    def StreamingOutputCall(self, request, context):
        echo_status(request, context)
        yield from responses(request, context)

    def StreamingInputCall(self, request_iterator, context):
        total = sum(len(request.payload.body) for request in request_iterator)
        return messages_pb2.StreamingInputCallResponse(aggregated_payload_size=total)

    def FullDuplexCall(self, request_iterator, context):
        echo_metadata(context)
        for request in request_iterator:
            echo_status(request, context)
            yield from responses(request, context)

    def HalfDuplexCall(self, request_iterator, context):
        for request in list(request_iterator):
            yield from responses(request, context)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=10000, help="0: any (the port is printed)")
    parser.add_argument("--use_tls", default="false", choices=["true", "false"])
    parser.add_argument("--tls_cert_file", default="")
    parser.add_argument("--tls_key_file", default="")
    args = parser.parse_args()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    test_pb2_grpc.add_TestServiceServicer_to_server(TestService(), server)
    address = f"127.0.0.1:{args.port}"
    if args.use_tls == "true":
        with open(args.tls_key_file, "rb") as f:
            key = f.read()
        with open(args.tls_cert_file, "rb") as f:
            cert = f.read()
        port = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        sys.exit(f"cannot listen on {address}")
    server.start()
    # The driver waits for this line to learn the port (with --port=0) and readiness.
    print(f"listening on port {port}", flush=True)
    stop = threading.Event()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    server.stop(None)


if __name__ == "__main__":
    main()
