# Thin wrappers; each target works on a fresh machine with only Python 3.11.
.PHONY: install test demo bench lint e2e image dev-up dev-down
install:
	python3 -m venv .venv && .venv/bin/python -m pip install -q -e '.[test]'
test:
	bash scripts/test.sh
demo:
	bash scripts/demo.sh
bench:
	bash bench/run.sh
lint: install
	.venv/bin/lint-imports --no-cache && .venv/bin/ruff check . && .venv/bin/mypy
e2e: install
	.venv/bin/python -m pytest tests/e2e -m e2e -rs
image:
	docker build -t tower:0.1.0 .
dev-up: install
	.venv/bin/python scripts/dev.py up
dev-down:
	.venv/bin/python scripts/dev.py down
