"""Generated gRPC code for the kubelet-facing protos in protos/.

Do not edit: regenerate with hack/gen-protos.sh.
"""
