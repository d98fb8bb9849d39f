"""Shared machinery: the experiment contract, the results store, runners, reports."""
