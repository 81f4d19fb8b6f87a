"""roofwatch workers: check a commit out, run its suites in a sandbox, return an envelope.

Workers hold no database or GitHub credentials; everything they learn travels back as a
versioned result envelope (``roofwatch.common.envelope``).
"""
