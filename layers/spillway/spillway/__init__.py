"""Spillway: a serverless, batch-optimized node autoscaler for Kubernetes on EC2.

What each part owns, and what it must never import (``tests/unit/test_architecture.py`` checks it):

=================  ==========================================================  ==========================
part               owns                                                        never imports
=================  ==========================================================  ==========================
``model``          data parsed from the real APIs, the records Spillway         SDKs, adapters, act,
                   stores and passes between steps                              planner
``planner``        every decision: ``plan(snapshot, groups, config, state,      any I/O (SDKs, os, clock),
                   now)``, pure and deterministic                               adapters, act
``adapters``       every SDK call (kubernetes, boto3), SDK errors turned into   act, planner
                   :mod:`spillway.errors`
``ports``          the five interfaces the steps see the world through         SDKs
``act``            carrying out plans: the plan cycle, scale-up and drain      SDKs (only through ports)
                   steps
``clients``        the one wiring: builds every adapter from the environment   —
``observe``        one observation of cluster and groups into a snapshot       SDKs (only through ports)
functions/*        thin handlers: event in, one call into spillway, result out SDKs
``local``, ``sim`` the embedded stack and the simulator, for the demo, tests,   (not shipped to Lambda;
                   benchmarks and ``spillway simulate``                         nothing shipped imports
                                                                                 them)
=================  ==========================================================  ==========================
"""

__version__ = "0.1.0"
