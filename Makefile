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
e2e:
	bash scripts/e2e.sh
# docker (or podman) where one runs; else the same recipe by hand (scripts/image.py, as root:
# debootstrap and chroot), a tarball for `ctr images import` or `docker load`.
image:
	@if command -v docker >/dev/null && docker info >/dev/null 2>&1; then docker build -t tower:0.1.0 .; \
	elif command -v podman >/dev/null; then podman build -t tower:0.1.0 .; \
	else python3 scripts/image.py --out build/tower-image.tar; fi
dev-up: install
	.venv/bin/python scripts/dev.py up
dev-down:
	.venv/bin/python scripts/dev.py down
