"""Tests of the kubelet-facing gRPC layer and the kubelet emulator."""
