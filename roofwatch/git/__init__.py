"""Git for everyone who needs a commit: bare mirrors fetched with hardened options, worktrees of
one commit, commit facts and revision names. The workers check commits out with it, the service's
flows and CLI resolve what a user or a webhook names; it stands on the ground floor alone."""
