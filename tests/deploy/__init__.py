"""Tests of the operator-facing deployment: manifests, image, kind helper."""
