"""What happens on the main branch, a pull request, a push, a night: the service's work, top-down."""
