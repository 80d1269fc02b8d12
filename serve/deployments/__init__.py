"""CPU deployments that host pipeline parts (tools, guardrails, rule kernels).

Each class is plain (not decorated where defined); ``serve/app.py`` turns it
into a deployment with options from the config, and ``serve/adapters.py``
wraps its handle in the Protocol the pipeline expects.
"""
