"""Pure regression analysis: lists of numbers and outcomes in, verdicts out.

No database, no HTTP: ``roofwatch.service.flows.detection`` adapts rows to these functions.
"""
