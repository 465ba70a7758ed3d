"""The shop MCP server of the mcp:* tasks: look-up, query and write tools over one SQLite file.

Run it as a stdio MCP server (the env does this, one process per env)::

    python -m gem_core.envs.mcp_tasks.server --db /path/to/shop.db

or as a file (``python .../mcp_tasks/server.py --db ...``); it imports nothing from
``gem_core``. It is built with the official MCP Python SDK (``MCPServer`` in mcp 2.x,
``FastMCP`` in mcp 1.x).

Every tool call opens its own SQLite connection and closes it before answering, so the
env can replace the database file between episodes (an atomic rename of a fresh copy of
the seed) while the server keeps running. The read-only ``query`` tool takes hostile SQL:

- it opens the file in read-only mode and its authorizer allows only reads (no writes,
  ``PRAGMA``, ``ATTACH``, table-valued functions) and only the SQL functions in
  `ALLOWED_FUNCTIONS` (what the tasks need; ``fts3_tokenizer``, ``randomblob``, ``instr``,
  ``load_extension`` ... are refused before the statement runs);
- it stops a statement after `QUERY_STEP_BUDGET` SQLite VM steps (a bound in work, so
  results are reproducible) or `QUERY_CPU_SECONDS` of CPU (steps differ in cost), and caps any string, blob or row at
  `MAX_VALUE_BYTES` and ``LIKE`` patterns at `MAX_LIKE_PATTERN_BYTES` (SQLite limits), which
  bounds what a single step can do: the worst query found runs about a second;
- SQL text is at most `MAX_SQL_CHARS` characters and at most `MAX_QUERY_ROWS` rows come
  back, cells clipped to 200 characters.

Every refusal is a `ShopError` whose message says what was refused and what to do; the
agent sees it as an ``isError`` result. The two SQLite limits need Python >= 3.11
(``Connection.setlimit``); on 3.10 only the function allow-list and the step budget apply.

Tools (errors raise, which the SDK turns into an ``isError`` result the agent sees):

- ``list_tables()``, ``describe_table(table)``, ``query(sql)`` — schema and read-only SQL;
- ``get_customer(customer_id | email)``, ``get_product(sku)``, ``get_order(order_id)``;
- ``add_customer(name, email, city)``, ``add_order(customer_id, items)``;
- ``update_stock(sku, quantity)``, ``update_price(sku, price_cents)``,
  ``update_order_status(order_id, status)``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sqlite3
import sys
import time
import urllib.parse
from typing import Any

if (
    __name__ == "__main__"
    and sys.path
    and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__))
):
    # Run as a file: keep this package's modules (env.py, tasks.py) from shadowing
    # top-level names for the SDK's imports.
    sys.path.pop(0)

try:  # pydantic needs this TypedDict on Python < 3.12 (it comes with the MCP SDK)
    from typing_extensions import TypedDict
except ImportError:  # pragma: no cover
    from typing import TypedDict

__all__ = [
    "TOOL_NAMES",
    "ORDER_STATUSES",
    "MAX_QUERY_ROWS",
    "MAX_SQL_CHARS",
    "MAX_VALUE_BYTES",
    "MAX_LIKE_PATTERN_BYTES",
    "ALLOWED_FUNCTIONS",
    "QUERY_STEP_BUDGET",
    "OrderLine",
    "Shop",
    "ShopError",
    "build_server",
    "main",
]

TOOL_NAMES = (
    "list_tables",
    "describe_table",
    "query",
    "get_customer",
    "get_product",
    "get_order",
    "add_customer",
    "add_order",
    "update_stock",
    "update_price",
    "update_order_status",
)
ORDER_STATUSES = ("pending", "shipped", "delivered", "cancelled")
# Allowed status changes; cancelling returns the order's items to stock.
_TRANSITIONS = {
    "pending": ("shipped", "cancelled"),
    "shipped": ("delivered", "cancelled"),
    "delivered": (),
    "cancelled": (),
}
MAX_QUERY_ROWS = 100
MAX_SQL_CHARS = 4_000
MAX_CELL_CHARS = 200
QUERY_STEP_BUDGET = 2_000_000
"""SQLite VM instructions one ``query`` may run (checked every 1000) before it is stopped."""
QUERY_CPU_SECONDS = 1.0
"""CPU seconds (of the server's thread) one ``query`` may use, checked with the step budget:
steps differ in cost (a ``GLOB`` with character classes over 2 KB values took 5 s for the
step budget), so work is bounded in time as well. The shop's task queries use milliseconds."""
MAX_VALUE_BYTES = 2_048
"""Largest string, blob or row a ``query`` may build or read (SQLite's LENGTH limit).

One VM step can build a whole value, or scan two of them (``instr`` over 1 MB values ran
11-17 s in one step), so the step budget bounds the work of a query only together with
this cap. The shop's longest value is 287 bytes (a ``CREATE TABLE`` statement); 2 KB leaves
room for a ``group_concat`` over a column.
"""
MAX_LIKE_PATTERN_BYTES = 100
"""Longest ``LIKE``/``GLOB`` pattern a ``query`` may use."""
ALLOWED_FUNCTIONS = frozenset(
    {
        # aggregates (and the two-argument min/max)
        "avg", "count", "group_concat", "max", "min", "sum", "total",
        # numbers and NULLs
        "abs", "coalesce", "ifnull", "iif", "nullif", "round", "typeof",
        # text (LIKE and GLOB call like() and glob())
        "glob", "length", "like", "lower", "substr", "substring", "upper",
        # dates (orders and settings hold ISO dates)
        "date", "datetime", "julianday", "strftime", "time",
        # ranking windows
        "dense_rank", "rank", "row_number",
    }
)  # fmt: skip
"""The SQL functions ``query`` allows: what the tasks need. Every other function is
refused when the statement is prepared — among them the ones that build or scan long
values in one step (``randomblob``, ``zeroblob``, ``printf``, ``replace``, ``instr``,
``trim`` with a character set), ``random``, and ``fts3_tokenizer`` (which returns a native
pointer and accepts an arbitrary one)."""

_READ_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}

QUERY_DESCRIPTION = (
    "Run one read-only SQL SELECT (SQLite dialect); rows come back as CSV (at most "
    f"{MAX_QUERY_ROWS}; writes, PRAGMA and ATTACH are refused). Available functions: "
    + ", ".join(sorted(ALLOWED_FUNCTIONS))
    + "."
)

INSTRUCTIONS = (
    "A small shop database: customers, products (prices in integer cents), orders "
    "(status pending/shipped/delivered/cancelled) and order_items. Use the typed tools "
    "for look-ups and changes, and `query` for read-only SQL."
)


class ShopError(ValueError):
    """A tool call the shop refuses (bad argument, unknown key, rule broken); shown to the agent."""


class OrderLine(TypedDict):
    """One line of a new order: a product SKU and a quantity (>= 1)."""

    sku: str
    quantity: int


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class Shop:
    """The tool implementations over the database at ``db_path`` (no MCP in here)."""

    def __init__(self, db_path: str):
        self.db_path = os.path.abspath(db_path)

    # --- connections ---------------------------------------------------------------
    def _connect(self, *, readonly: bool = False) -> sqlite3.Connection:
        if not os.path.exists(self.db_path):
            raise ShopError(f"the shop database {self.db_path} does not exist")
        if readonly:
            uri = "file:" + urllib.parse.quote(self.db_path) + "?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        else:
            conn = sqlite3.connect(self.db_path, isolation_level=None)
            conn.execute("PRAGMA foreign_keys = ON")
        conn.row_factory = sqlite3.Row
        return conn

    def _read(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        conn = self._connect(readonly=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def _tables(self) -> list[str]:
        rows = self._read(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
        return [r["name"] for r in rows]

    def _product(self, conn: sqlite3.Connection, sku: Any) -> sqlite3.Row:
        if not isinstance(sku, str) or not sku.strip():
            raise ShopError(f"sku must be a non-empty string such as 'BK-101', got {sku!r}")
        row = conn.execute("SELECT * FROM products WHERE sku = ?", (sku.strip(),)).fetchone()
        if row is None:
            raise ShopError(
                f"no product with sku {sku!r}; find SKUs with query('SELECT sku, name FROM products')"
            )
        return row

    def _today(self, conn: sqlite3.Connection) -> str:
        row = conn.execute("SELECT value FROM settings WHERE key = 'today'").fetchone()
        return row["value"] if row is not None else "1970-01-01"

    def _order(self, conn: sqlite3.Connection, order_id: int) -> dict[str, Any]:
        order = conn.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()
        if order is None:
            raise ShopError(f"no order with id {order_id}")
        items = conn.execute(
            "SELECT p.sku, p.name, i.quantity, i.unit_price_cents FROM order_items i "
            "JOIN products p ON p.id = i.product_id WHERE i.order_id = ? ORDER BY p.sku",
            (order_id,),
        ).fetchall()
        lines = [dict(r) for r in items]
        return {
            **dict(order),
            "items": lines,
            "total_cents": sum(r["quantity"] * r["unit_price_cents"] for r in lines),
        }

    # --- schema and SQL --------------------------------------------------------------
    def list_tables(self) -> str:
        conn = self._connect(readonly=True)
        try:
            lines = []
            for name in self._tables():
                (count,) = conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()
                lines.append(f"{name} ({count} rows)")
        finally:
            conn.close()
        return "\n".join(lines)

    def describe_table(self, table: str) -> str:
        tables = self._tables()
        if table not in tables:
            raise ShopError(f"no table {table!r}; the tables are: {', '.join(tables)}")
        rows = self._read(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        )
        return rows[0]["sql"]

    def query(self, sql: str) -> str:
        if not isinstance(sql, str) or not sql.strip():
            raise ShopError("sql must be a non-empty SELECT statement")
        if len(sql) > MAX_SQL_CHARS:
            raise ShopError(f"the query has {len(sql)} characters; at most {MAX_SQL_CHARS}")
        conn = self._connect(readonly=True)
        steps = [0]
        cpu_limit = time.thread_time() + QUERY_CPU_SECONDS
        too_slow = [False]

        def budget() -> int:
            steps[0] += 1
            if time.thread_time() > cpu_limit:
                too_slow[0] = True
                return 1
            return 1 if steps[0] * 1000 > QUERY_STEP_BUDGET else 0

        refused: list[str] = []

        def authorize(action: int, arg1: Any, arg2: Any, *_: Any) -> int:
            if action == sqlite3.SQLITE_FUNCTION:  # arg2 is the function's name
                if str(arg2).lower() in ALLOWED_FUNCTIONS:
                    return sqlite3.SQLITE_OK
                refused.append(str(arg2))
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY

        conn.set_authorizer(authorize)
        conn.set_progress_handler(budget, 1000)
        if hasattr(conn, "setlimit"):  # Python >= 3.11
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
            conn.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, MAX_LIKE_PATTERN_BYTES)
        try:
            cursor = conn.execute(sql)
            if cursor.description is None:
                raise ShopError("only SELECT statements are allowed in query")
            columns = [d[0] for d in cursor.description]
            rows = cursor.fetchmany(MAX_QUERY_ROWS + 1)
        except (sqlite3.Error, sqlite3.Warning) as exc:
            if too_slow[0]:
                raise ShopError(
                    f"the query was stopped: it used more than {QUERY_CPU_SECONDS:g} s of CPU; "
                    "add conditions or a LIMIT, or use simpler patterns"
                ) from None
            if steps[0] * 1000 > QUERY_STEP_BUDGET:
                raise ShopError(
                    "the query was stopped: it ran too long (more than "
                    f"{QUERY_STEP_BUDGET} SQLite steps); add conditions or a LIMIT"
                ) from None
            if "too big" in str(exc):
                raise ShopError(
                    f"the query was stopped: it built a value over {MAX_VALUE_BYTES} bytes; "
                    "select less data"
                ) from None
            if "pattern too complex" in str(exc):
                raise ShopError(
                    f"LIKE/GLOB patterns may have at most {MAX_LIKE_PATTERN_BYTES} bytes"
                ) from None
            if refused:  # SQLite stops preparing at the first refusal
                raise ShopError(
                    f"the SQL function {refused[0]}() is not allowed in query; allowed "
                    f"functions: {', '.join(sorted(ALLOWED_FUNCTIONS))}"
                ) from None
            if "not authorized" in str(exc):
                raise ShopError(
                    "query is read-only: only SELECT (and WITH ... SELECT) statements are "
                    "allowed; use the update_*/add_* tools to change data"
                ) from None
            raise ShopError(f"SQL error: {exc}") from None
        finally:
            conn.close()
        more = len(rows) > MAX_QUERY_ROWS
        rows = rows[:MAX_QUERY_ROWS]
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(
                [
                    "NULL"
                    if v is None
                    else (
                        str(v)[:MAX_CELL_CHARS] if not isinstance(v, bytes) else f"<{len(v)} bytes>"
                    )
                    for v in row
                ]
            )
        tail = (
            f"(first {MAX_QUERY_ROWS} rows shown; add a LIMIT/OFFSET or aggregate)"
            if more
            else f"({len(rows)} row{'s' if len(rows) != 1 else ''})"
        )
        return out.getvalue() + tail

    # --- look-ups ----------------------------------------------------------------------
    def get_customer(self, customer_id: int | None = None, email: str | None = None) -> str:
        if (customer_id is None) == (email is None):
            raise ShopError("give exactly one of customer_id or email")
        conn = self._connect(readonly=True)
        try:
            if customer_id is not None:
                row = conn.execute(
                    "SELECT * FROM customers WHERE id = ?", (customer_id,)
                ).fetchone()
            else:
                row = conn.execute(
                    "SELECT * FROM customers WHERE email = ? COLLATE NOCASE", (email.strip(),)
                ).fetchone()
            if row is None:
                key = f"id {customer_id}" if customer_id is not None else f"email {email!r}"
                raise ShopError(f"no customer with {key}")
            orders = conn.execute(
                "SELECT id, order_date, status FROM orders WHERE customer_id = ? ORDER BY order_date, id",
                (row["id"],),
            ).fetchall()
        finally:
            conn.close()
        return _json({**dict(row), "orders": [dict(o) for o in orders]})

    def get_product(self, sku: str) -> str:
        conn = self._connect(readonly=True)
        try:
            return _json(dict(self._product(conn, sku)))
        finally:
            conn.close()

    def get_order(self, order_id: int) -> str:
        conn = self._connect(readonly=True)
        try:
            return _json(self._order(conn, order_id))
        finally:
            conn.close()

    # --- writes ------------------------------------------------------------------------
    def add_customer(self, name: str, email: str, city: str) -> str:
        name, email, city = (str(v).strip() for v in (name, email, city))
        if not name or not city:
            raise ShopError("name and city must be non-empty")
        if "@" not in email or " " in email:
            raise ShopError(f"email must look like name@example.com, got {email!r}")
        conn = self._connect()
        try:
            dup = conn.execute(
                "SELECT id FROM customers WHERE email = ? COLLATE NOCASE", (email,)
            ).fetchone()
            if dup is not None:
                raise ShopError(f"a customer with email {email!r} already exists (id {dup['id']})")
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                cur = conn.execute(
                    "INSERT INTO customers (name, email, city, joined) VALUES (?, ?, ?, ?)",
                    (name, email, city, self._today(conn)),
                )
            row = conn.execute("SELECT * FROM customers WHERE id = ?", (cur.lastrowid,)).fetchone()
            return _json(dict(row))
        finally:
            conn.close()

    def add_order(self, customer_id: int, items: list[OrderLine]) -> str:
        if not items:
            raise ShopError("items must list at least one {'sku': ..., 'quantity': ...}")
        conn = self._connect()
        try:
            if (
                conn.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone()
                is None
            ):
                raise ShopError(f"no customer with id {customer_id}")
            lines: list[tuple[sqlite3.Row, int]] = []
            seen: set[str] = set()
            for item in items:
                product = self._product(conn, item.get("sku"))
                quantity = item.get("quantity")
                if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity < 1:
                    raise ShopError(
                        f"quantity of {product['sku']} must be an integer >= 1, got {quantity!r}"
                    )
                if product["sku"] in seen:
                    raise ShopError(f"{product['sku']} is listed twice; give one line per product")
                seen.add(product["sku"])
                if product["stock"] < quantity:
                    raise ShopError(
                        f"not enough stock of {product['sku']}: {product['stock']} left, {quantity} asked"
                    )
                lines.append((product, quantity))
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                cur = conn.execute(
                    "INSERT INTO orders (customer_id, order_date, status) VALUES (?, ?, 'pending')",
                    (customer_id, self._today(conn)),
                )
                for product, quantity in lines:
                    conn.execute(
                        "INSERT INTO order_items VALUES (?, ?, ?, ?)",
                        (cur.lastrowid, product["id"], quantity, product["price_cents"]),
                    )
                    conn.execute(
                        "UPDATE products SET stock = stock - ? WHERE id = ?",
                        (quantity, product["id"]),
                    )
            return _json(self._order(conn, cur.lastrowid))
        finally:
            conn.close()

    def update_stock(self, sku: str, quantity: int) -> str:
        if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity < 0:
            raise ShopError(
                f"quantity (the new stock level) must be an integer >= 0, got {quantity!r}"
            )
        return self._set_product_field(sku, "stock", quantity)

    def update_price(self, sku: str, price_cents: int) -> str:
        if isinstance(price_cents, bool) or not isinstance(price_cents, int) or price_cents < 1:
            raise ShopError(f"price_cents must be an integer >= 1, got {price_cents!r}")
        return self._set_product_field(sku, "price_cents", price_cents)

    def _set_product_field(self, sku: str, column: str, value: int) -> str:
        """Set ``products.<column>`` of ``sku`` in one transaction; the reply names the old and
        new values (``old_<column>``, ``<column>``)."""
        assert column in ("stock", "price_cents")  # a fixed name, never model text
        conn = self._connect()
        try:
            product = self._product(conn, sku)
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(f"UPDATE products SET {column} = ? WHERE id = ?", (value, product["id"]))
            return _json({"sku": product["sku"], f"old_{column}": product[column], column: value})
        finally:
            conn.close()

    def update_order_status(self, order_id: int, status: str) -> str:
        if status not in ORDER_STATUSES:
            raise ShopError(f"status must be one of {', '.join(ORDER_STATUSES)}, got {status!r}")
        conn = self._connect()
        try:
            order = self._order(conn, order_id)
            old = order["status"]
            if status not in _TRANSITIONS[old]:
                allowed = ", ".join(_TRANSITIONS[old]) or "none (final status)"
                raise ShopError(
                    f"order {order_id} is {old}; it cannot become {status} (allowed: {allowed})"
                )
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("UPDATE orders SET status = ? WHERE id = ?", (status, order_id))
                if status == "cancelled":
                    conn.execute(
                        "UPDATE products SET stock = stock + (SELECT quantity FROM order_items i "
                        "WHERE i.order_id = ? AND i.product_id = products.id) WHERE id IN "
                        "(SELECT product_id FROM order_items WHERE order_id = ?)",
                        (order_id, order_id),
                    )
            restocked = (
                [{"sku": i["sku"], "quantity": i["quantity"]} for i in order["items"]]
                if status == "cancelled"
                else []
            )
            return _json(
                {"order_id": order_id, "old_status": old, "status": status, "restocked": restocked}
            )
        finally:
            conn.close()


def _server_class() -> Any:
    try:
        from mcp.server.mcpserver import MCPServer  # mcp >= 2
    except ImportError:
        from mcp.server.fastmcp import FastMCP as MCPServer  # mcp 1.x
    return MCPServer


def _tool_error_class() -> type[Exception]:
    try:
        from mcp.server.mcpserver.exceptions import ToolError  # mcp >= 2
    except ImportError:
        from mcp.server.fastmcp.exceptions import ToolError  # mcp 1.x
    return ToolError


def build_server(db_path: str) -> Any:
    """The MCP server (not yet running) whose tools act on the SQLite file ``db_path``."""
    shop = Shop(db_path)
    app = _server_class()("gem-shop", instructions=INSTRUCTIONS, log_level="WARNING")
    tool_error = _tool_error_class()

    def _guard(fn: Any, *args: Any) -> str:
        # A refused call reaches the agent with its message (other exceptions are crashes,
        # which the SDK reports without details and logs with a traceback).
        try:
            return fn(*args)
        except ShopError as exc:
            raise tool_error(str(exc)) from None

    @app.tool()
    def list_tables() -> str:
        """List the tables of the shop database with their row counts."""
        return _guard(shop.list_tables)

    @app.tool()
    def describe_table(table: str) -> str:
        """Show the CREATE TABLE statement (columns, types, keys) of one table."""
        return _guard(shop.describe_table, table)

    @app.tool(description=QUERY_DESCRIPTION)
    def query(sql: str) -> str:
        return _guard(shop.query, sql)

    @app.tool()
    def get_customer(customer_id: int | None = None, email: str | None = None) -> str:
        """Look up one customer by id or by email (give exactly one); includes their orders."""
        return _guard(shop.get_customer, customer_id, email)

    @app.tool()
    def get_product(sku: str) -> str:
        """Look up one product by SKU (e.g. 'BK-101'): name, category, price_cents, stock."""
        return _guard(shop.get_product, sku)

    @app.tool()
    def get_order(order_id: int) -> str:
        """Look up one order: customer, date, status, items (with unit prices) and total_cents."""
        return _guard(shop.get_order, order_id)

    @app.tool()
    def add_customer(name: str, email: str, city: str) -> str:
        """Register a new customer (joined today); the email must be new."""
        return _guard(shop.add_customer, name, email, city)

    @app.tool()
    def add_order(customer_id: int, items: list[OrderLine]) -> str:
        """Place one pending order dated today: items are {"sku", "quantity"} lines, priced at the current price and taken from stock (fails if stock is short)."""
        return _guard(shop.add_order, customer_id, [dict(i) for i in items])

    @app.tool()
    def update_stock(sku: str, quantity: int) -> str:
        """Set the stock level of a product to `quantity` (the new total, not a change)."""
        return _guard(shop.update_stock, sku, quantity)

    @app.tool()
    def update_price(sku: str, price_cents: int) -> str:
        """Set the price of a product, in integer cents."""
        return _guard(shop.update_price, sku, price_cents)

    @app.tool()
    def update_order_status(order_id: int, status: str) -> str:
        """Change an order's status: pending -> shipped -> delivered, or pending/shipped -> cancelled (cancelling returns its items to stock)."""
        return _guard(shop.update_order_status, order_id, status)

    return app


def main(argv: list[str] | None = None) -> None:
    """Parse ``--db PATH`` and serve the shop over stdio."""
    parser = argparse.ArgumentParser(description="The GEM shop MCP server (stdio).")
    parser.add_argument("--db", required=True, help="path of the SQLite database file")
    args = parser.parse_args(argv)
    build_server(args.db).run()


if __name__ == "__main__":
    main()
    # The client closed stdin: every write is already committed (each call closes its
    # connection), so skip the slow interpreter teardown of the SDK's threads and loops
    # (about 0.7 s, paid at every env close otherwise).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
