# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: run test test-unit test-live fuzz install lint format openapi openapi-check worker beat bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Development server: SQLite, in-process tasks and console e-mail unless DATABASE_URL / REDIS_URL are set.
run: install
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py migrate --noinput
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py runserver 127.0.0.1:$(PORT)

# The unit suite (proves the code), then the live layer (proves the service: gunicorn, PostgreSQL, Redis,
# worker and beat, over HTTP). The live layer skips with its reason on SQLite, except under CI=true.
test: test-unit test-live

test-unit: install
	.ci/pytest $(BIN)/pytest -n $${TEST_WORKERS:-2} $(PYTEST_ARGS)

test-live: install
	.ci/pytest $(BIN)/pytest tests/live -p no:randomly -n 0 -m "not fuzz" $(PYTEST_ARGS)

# schemathesis over openapi.yaml against the live service.
fuzz: install
	.ci/pytest $(BIN)/pytest tests/live -p no:randomly -n 0 -m fuzz $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-logo

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

openapi: install
	DEBUG=1 $(BIN)/python manage.py spectacular --validate --fail-on-warn --file openapi.yaml

openapi-check: install
	DEBUG=1 $(BIN)/python manage.py spectacular --validate --fail-on-warn --file /tmp/openapi.current.yaml
	diff -u openapi.yaml /tmp/openapi.current.yaml || (echo "openapi.yaml is stale: run make openapi" && exit 1)

worker: install
	$(BIN)/celery -A iam worker --loglevel=INFO --without-gossip --without-mingle --without-heartbeat

beat: install
	$(BIN)/celery -A iam beat --loglevel=INFO

bench: install
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) staticfiles db.sqlite3
