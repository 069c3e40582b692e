"""The Prometheus alert and recording rules pairwatch ships, generated per configuration.

Standard library only and part of the package (not of the repository's ``dashboards/``
tooling), because ``pairwatch dashboards export`` renders them at run time for the
operator's selector, grouping labels, objective and links; a pip-installed pairwatch has no
checkout to run a generator from. ``blame`` maps diagnoses and close reasons to the side
at fault, ``rules`` holds the rules as data, ``render`` writes them as YAML, and
``threshold_tests`` / ``slo_tests`` write the promtool tests that go with them.
"""
