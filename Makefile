# hookwire — every target sets up what it needs on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
NODE_EXT := sample_extensions/node_echo

.PHONY: setup proto proto-check test test-fast soak demo bench bench-quick node-deps postgres clean

setup: $(VENV)/.installed

# Two distributions from this tree: hookwire-sdk (sdk/pyproject.toml: what an extension author installs) and
# hookwire (the host, which depends on it). Both editable.
$(VENV)/.installed: pyproject.toml sdk/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ./sdk
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# The Node.js sample extension (written against proto/ without the SDK) needs @grpc/grpc-js.
node-deps: $(NODE_EXT)/node_modules/.installed

$(NODE_EXT)/node_modules/.installed: $(NODE_EXT)/package.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(NODE_EXT) && npm install --silent --no-audit --no-fund && touch node_modules/.installed; \
	else echo "npm not found: the Node.js sample extension will be skipped"; fi

# The store and scale tests start a throwaway PostgreSQL server (tests/fixtures/postgres.py, initdb into a temp dir):
# its binaries come from Debian's postgresql package, installed here when missing.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
postgres:
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "installing PostgreSQL (Debian's postgresql package) for the store tests"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq postgresql >/dev/null; \
	else echo "no PostgreSQL server and no apt-get: the PostgreSQL tests will skip (and fail under CI)"; fi

proto: setup
	$(PY) scripts/gen_proto.py

proto-check: setup
	$(PY) scripts/gen_proto.py --check

test: setup node-deps postgres proto-check
	$(PY) -m pytest -q -p no:cacheprovider

# The soak test for minutes (HOOKWIRE_SOAK_SECONDS, default 180; `make test` runs it for 20 s).
SOAK_SECONDS ?= 180
soak: setup
	HOOKWIRE_SOAK_SECONDS=$(SOAK_SECONDS) $(PY) -m pytest -q -p no:cacheprovider -o timeout=0 tests/soak

demo: setup node-deps
	$(PY) -m host.cli demo

bench: setup
	$(PY) -m bench

bench-quick: setup
	$(PY) -m bench --quick

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info $(NODE_EXT)/node_modules
