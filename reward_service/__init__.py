"""reward-service: coverage rewards for LLM-written hardware testbench stimulus."""

#: The release. Part of every result's ``versions`` and of the result-cache key, so it is read
#: from here (not from installed metadata, which an editable install leaves stale): a change
#: that can change a score bumps it (CHANGELOG.md).
__version__ = "0.15.0"
