"""One module per dashboard page; each ``register(app)`` adds its routes."""
