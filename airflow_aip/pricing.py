"""``python -m airflow_aip.pricing refresh``: the price table, refreshed from Google's Billing Catalog API.

Reads every SKU of Vertex AI (``services.skus.list``, cloudbilling v1) with the user's
credentials (Application Default Credentials through google-auth, or ``--api-key``), turns the
training SKUs into the table's rows (:mod:`airflow_aip.jobs.vertex.skus`), writes the table
(``--out``, default: the shipped snapshot) with the fetch's source and date, and prints what
changed, one line a row: ``+`` new, ``~`` a changed price. ``show`` prints the table's source.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from airflow_aip.jobs.pricing import SNAPSHOT, PriceTable, refreshed


def _refresh(args: argparse.Namespace) -> int:
    from airflow_aip.hooks.billing import CATALOG_ENDPOINT, catalog_rows, default_credentials

    credentials = None if args.api_key else default_credentials()
    rows, skipped, source = catalog_rows(
        args.service,
        endpoint=args.endpoint or CATALOG_ENDPOINT,
        credentials=credentials,
        api_key=args.api_key,
    )
    before = PriceTable.load(args.table)
    today = datetime.now(timezone.utc).date().isoformat()
    table, changes = refreshed(before.data, rows, as_of=today, source=source)
    out = Path(args.out or args.table or SNAPSHOT)
    out.write_text(json.dumps(table, indent=1) + "\n")
    for line in changes:
        print(line)
    print(
        f"{len(rows)} rows from {source} ({skipped} SKUs named nothing we price), "
        f"{len(changes)} changed; written to {out} as of {today}"
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    table = PriceTable.load(args.table)
    counts = ", ".join(f"{n} {status}" for status, n in table.provenance_counts().items())
    print(f"{table.describe()}, in {table.currency}; rows: {counts}; {table.data['source'].get('how', '')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_aip.pricing", description=__doc__.split("\n")[0])
    parser.add_argument("--table", help="the table to start from (default: the shipped snapshot)")
    commands = parser.add_subparsers(dest="command", required=True)
    refresh = commands.add_parser("refresh", help="refresh the table from the Billing Catalog API")
    refresh.add_argument("--out", help="where to write the table (default: --table, or the snapshot)")
    refresh.add_argument("--endpoint", help="the Catalog API's endpoint (default: Google's)")
    refresh.add_argument("--api-key", help="an API key instead of Application Default Credentials")
    refresh.add_argument("--service", default="", help="the catalog's service ID (default: Vertex AI's)")
    refresh.set_defaults(run=_refresh)
    commands.add_parser("show", help="say which table is used").set_defaults(run=_show)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
