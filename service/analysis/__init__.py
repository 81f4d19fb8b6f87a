"""Pure regression analysis: lists of numbers and outcomes in, verdicts out.

No database, no HTTP: ``service.analyze`` adapts rows to these functions.
"""
