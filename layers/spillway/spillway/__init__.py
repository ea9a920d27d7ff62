"""Spillway: a serverless, batch-optimized node autoscaler for Kubernetes on EC2."""

__version__ = "0.1.0"
