"""The FastAPI application: JSON routes, webhooks, metrics, and the embedded executor."""
