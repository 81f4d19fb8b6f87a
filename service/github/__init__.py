"""GitHub integration: webhooks in, statuses/check runs and the PR comment out."""
