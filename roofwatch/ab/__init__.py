"""The A/B statistics a worker's rounds and the service's verdicts share: one floor for both.

``abtest`` decides one benchmark from paired rounds, ``fdr`` adjusts a comparison's p-values,
``rounds`` pairs the rounds' measurements and says which benchmarks a later round still needs,
``interactions`` reads a benchmark's modes across processes. Pure: numbers and the envelope's
records in, verdicts out; it imports the ground floor (``roofwatch.common``) alone, so the
workers that run the rounds need nothing of the service.
"""
