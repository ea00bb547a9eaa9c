"""A policy stream read by Debian's python3-grpcio (gRPC's C core), for interoperability tests.

Reads JSON on stdin: target ("localhost:PORT"), ca_pem, key_pem, cert_pem, request (hex of the serialized
SubscribePolicyUpdatesRequest). Opens SubscribePolicyUpdates with the library's default channel options
(its flow-control probes ping while it receives) and prints the size of every message received, one per
line. When the stream ends with an error it prints the status and details to stderr and exits 1.
"""
import json
import sys

import grpc


def main() -> int:
    target = json.load(sys.stdin)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=target["ca_pem"].encode(),
        private_key=target["key_pem"].encode(),
        certificate_chain=target["cert_pem"].encode(),
    )
    options = [("grpc.max_receive_message_length", -1)]
    with grpc.secure_channel(target["target"], credentials, options) as channel:
        subscribe = channel.unary_stream("/svc.policy.v1.PolicyService/SubscribePolicyUpdates")
        try:
            for message in subscribe(bytes.fromhex(target["request"])):
                print(len(message), flush=True)
        except grpc.RpcError as err:
            print(f"{err.code()}: {err.details()}", file=sys.stderr, flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
