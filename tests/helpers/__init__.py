"""What the tests share besides conftest.py's fixtures: modules imported by the tests
(`from helpers import processes`) and scripts run as subprocesses (`processes.SCRIPTS / name`).
The tests' root, tests/, is on sys.path (pytest puts conftest.py's folder there)."""
