# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test test-unit test-live fuzz install install-dev lint format openapi openapi-check worker beat bench clean

# `make run` installs what the service needs; the test and lint tools come with the `dev` extra, which
# every other target installs.
$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP)

install: $(STAMP)
install-dev: $(DEV_STAMP)

# Development server: SQLite, in-process tasks and console e-mail unless DATABASE_URL / REDIS_URL are set.
run: install
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py migrate --noinput
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py runserver 127.0.0.1:$(PORT)

# The unit suite (proves the code), then the live layer (proves the service: gunicorn, PostgreSQL, Redis,
# worker and beat, over HTTP). The live layer skips with its reason on SQLite, except under CI=true.
test: test-unit test-live

test-unit: install-dev
	.ci/pytest $(BIN)/pytest -rs -n $${TEST_WORKERS:-2} $(PYTEST_ARGS)

test-live: install-dev
	.ci/pytest $(BIN)/pytest tests/live -rs -p no:randomly -n 0 -m "not fuzz" $(PYTEST_ARGS)

# schemathesis over openapi.yaml against the live service.
fuzz: install-dev
	.ci/pytest $(BIN)/pytest tests/live -rs -p no:randomly -n 0 -m fuzz $(PYTEST_ARGS)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-logo

format: install-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

openapi: install-dev
	DEBUG=1 $(BIN)/python manage.py spectacular --validate --fail-on-warn --file openapi.yaml

openapi-check: install-dev
	DEBUG=1 $(BIN)/python manage.py spectacular --validate --fail-on-warn --file /tmp/openapi.current.yaml
	diff -u openapi.yaml /tmp/openapi.current.yaml || (echo "openapi.yaml is stale: run make openapi" && exit 1)

# The worker and beat of the Redis mode (REDIS_URL set); development settings (DEBUG=1) unless DEBUG is
# given, as for `make run`.
worker: install
	DEBUG=$${DEBUG:-1} $(BIN)/python -m iam.worker --loglevel=INFO --without-gossip --without-mingle --without-heartbeat

beat: install
	mkdir -p var
	DEBUG=$${DEBUG:-1} $(BIN)/celery -A iam beat --loglevel=INFO --schedule var/celerybeat-schedule

bench: install-dev
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) staticfiles db.sqlite3
