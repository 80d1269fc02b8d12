"""Model serving: profiles, the embedded model's preparation, and ray.serve.llm deployments."""
