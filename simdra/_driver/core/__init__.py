"""The ground floor: vocabulary that every layer may import and that imports nothing of ours.

Today it holds the device health states (`health`); the layer contracts in
pyproject.toml (`[tool.importlinter]`) keep it at the bottom.
"""
