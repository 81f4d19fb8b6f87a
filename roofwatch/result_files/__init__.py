"""Result files, whoever reads them: the JUnit XML and pytest-benchmark JSON a worker's suite
writes (``suite_results``, through a bounded JSON reader), and the formats a team uploads from
its own CI (``uploads``: pytest-benchmark, Google Benchmark, nvbench, asv, ...). One package, so
a file means the same on a worker and on the server; it stands on the ground floor alone."""
