"""The Tandem Ray Serve application: deployments, ingress, stores, telemetry and the CLI."""
