"""Datasets, on-disk formats, manifests and loaders.

This layer never imports torch, transformers or TRL: ``posttrain data …`` must start fast.
"""
