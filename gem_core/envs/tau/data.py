"""The retail database every ``tau:Retail`` episode starts from: schema and rows, written for gem_core.

All names, addresses, products and orders are invented for this package (``example.com``
emails). Prices are integer cents. `build_seed_database` creates the tables in a SQLite
connection; the env copies that database per episode.
"""

from __future__ import annotations

import sqlite3

__all__ = ["SCHEMA", "USERS", "PAYMENT_METHODS", "PRODUCTS", "ITEMS", "ORDERS", "build_seed_database"]

SCHEMA = """
CREATE TABLE users (
    user_id TEXT PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE, address1 TEXT NOT NULL, city TEXT NOT NULL,
    state TEXT NOT NULL, zip TEXT NOT NULL
);
CREATE TABLE payment_methods (
    payment_id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(user_id),
    kind TEXT NOT NULL CHECK (kind IN ('credit_card', 'gift_card', 'paypal')),
    description TEXT NOT NULL, balance_cents INTEGER
);
CREATE TABLE products (product_id TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE items (
    item_id TEXT PRIMARY KEY, product_id TEXT NOT NULL REFERENCES products(product_id),
    options TEXT NOT NULL, price_cents INTEGER NOT NULL, available INTEGER NOT NULL
);
CREATE TABLE orders (
    order_id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(user_id),
    status TEXT NOT NULL, address1 TEXT NOT NULL, city TEXT NOT NULL, state TEXT NOT NULL,
    zip TEXT NOT NULL, payment_id TEXT NOT NULL REFERENCES payment_methods(payment_id),
    placed TEXT NOT NULL, items_modified INTEGER NOT NULL DEFAULT 0, cancel_reason TEXT
);
CREATE TABLE order_items (
    order_id TEXT NOT NULL REFERENCES orders(order_id), line INTEGER NOT NULL,
    item_id TEXT NOT NULL REFERENCES items(item_id), price_cents INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'ordered', new_item_id TEXT,
    PRIMARY KEY (order_id, line)
);
CREATE TABLE transactions (
    order_id TEXT NOT NULL, payment_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('payment', 'refund')), amount_cents INTEGER NOT NULL
);
"""
"""The tables. ``transactions`` has no id column: a final state is graded as a multiset
of rows, so the same refunds made in another order compare equal."""

# user_id, first, last, email, address1, city, state, zip
USERS = (
    ("U01", "Ava", "Moore", "ava.moore@example.com", "12 Birch Lane", "Portland", "OR", "97201"),
    ("U02", "Ben", "Carter", "ben.carter@example.com", "88 Harbor St", "Boston", "MA", "02110"),
    ("U03", "Chloe", "Diaz", "chloe.diaz@example.com", "5 Cedar Ct", "Austin", "TX", "78701"),
    ("U04", "Daniel", "Evans", "dan.evans@example.com", "301 Pine Ave", "Denver", "CO", "80202"),
    ("U05", "Emma", "Fischer", "emma.fischer@example.com", "47 Lake Rd", "Madison", "WI", "53703"),
    ("U06", "Farid", "Ghani", "farid.ghani@example.com", "19 Elm St", "Seattle", "WA", "98101"),
    ("U07", "Grace", "Hill", "grace.hill@example.com", "230 Oak Blvd", "Chicago", "IL", "60601"),
    ("U08", "Hiro", "Ito", "hiro.ito@example.com", "9 Maple Dr", "San Jose", "CA", "95112"),
    ("U09", "Isla", "Jones", "isla.jones@example.com", "64 River Way", "Nashville", "TN", "37201"),
    ("U10", "Jonas", "Klein", "jonas.klein@example.com", "12 Hill St", "Portland", "ME", "04101"),
    ("U11", "Kara", "Lopez", "kara.lopez@example.com", "77 Sunset Ave", "Phoenix", "AZ", "85004"),
    ("U12", "Liam", "Moore", "liam.moore@example.com", "12 Birch Lane", "Portland", "OR", "97201"),
)

# payment_id, user_id, kind, description, balance_cents (gift cards only)
PAYMENT_METHODS = (
    ("PM01", "U01", "credit_card", "Visa ending in 4242", None),
    ("PM02", "U01", "gift_card", "gift card", 5000),
    ("PM03", "U02", "paypal", "PayPal account", None),
    ("PM04", "U02", "credit_card", "Mastercard ending in 1881", None),
    ("PM05", "U03", "credit_card", "Visa ending in 3005", None),
    ("PM06", "U04", "gift_card", "gift card", 1000),
    ("PM07", "U04", "credit_card", "Amex ending in 0005", None),
    ("PM08", "U05", "paypal", "PayPal account", None),
    ("PM09", "U06", "credit_card", "Visa ending in 7710", None),
    ("PM10", "U06", "gift_card", "gift card", 20000),
    ("PM11", "U07", "credit_card", "Mastercard ending in 5520", None),
    ("PM12", "U08", "paypal", "PayPal account", None),
    ("PM13", "U08", "gift_card", "gift card", 300),
    ("PM14", "U09", "credit_card", "Visa ending in 8080", None),
    ("PM15", "U10", "credit_card", "Visa ending in 6161", None),
    ("PM16", "U10", "paypal", "PayPal account", None),
    ("PM17", "U11", "gift_card", "gift card", 15000),
    ("PM18", "U12", "credit_card", "Visa ending in 9191", None),
)

PRODUCTS = (
    ("P1", "T-Shirt"),
    ("P2", "Ceramic Mug"),
    ("P3", "Wireless Headphones"),
    ("P4", "Hiking Backpack"),
    ("P5", "Desk Lamp"),
    ("P6", "Running Sneakers"),
    ("P7", "Electric Kettle"),
    ("P8", "Smart Watch"),
)

# item_id, product_id, options, price_cents, available
ITEMS = (
    ("1001", "P1", "color=black; size=M", 2500, 1),
    ("1002", "P1", "color=black; size=L", 2500, 1),
    ("1003", "P1", "color=white; size=M", 2300, 1),
    ("1004", "P1", "color=navy; size=L", 2600, 0),
    ("2001", "P2", "color=red; capacity=350ml", 1200, 1),
    ("2002", "P2", "color=blue; capacity=350ml", 1200, 1),
    ("2003", "P2", "color=blue; capacity=500ml", 1500, 1),
    ("2004", "P2", "color=green; capacity=500ml", 1500, 0),
    ("3001", "P3", "color=black; battery=20h", 8900, 1),
    ("3002", "P3", "color=white; battery=20h", 8900, 1),
    ("3003", "P3", "color=black; battery=40h", 12900, 1),
    ("4001", "P4", "size=20L; color=grey", 5400, 1),
    ("4002", "P4", "size=30L; color=grey", 6400, 1),
    ("4003", "P4", "size=30L; color=orange", 6400, 0),
    ("4004", "P4", "size=40L; color=green", 7900, 1),
    ("5001", "P5", "finish=silver; bulb=LED", 3200, 1),
    ("5002", "P5", "finish=black; bulb=LED", 3200, 1),
    ("5003", "P5", "finish=brass; bulb=halogen", 2900, 1),
    ("6001", "P6", "size=9; color=blue", 7500, 1),
    ("6002", "P6", "size=10; color=blue", 7500, 1),
    ("6003", "P6", "size=10; color=black", 8000, 1),
    ("6004", "P6", "size=11; color=black", 8000, 0),
    ("7001", "P7", "capacity=1L; material=plastic", 2800, 1),
    ("7002", "P7", "capacity=1.7L; material=steel", 4200, 1),
    ("7003", "P7", "capacity=1.7L; material=glass", 4500, 1),
    ("8001", "P8", "strap=silicone; size=40mm", 19900, 1),
    ("8002", "P8", "strap=silicone; size=44mm", 21900, 1),
    ("8003", "P8", "strap=leather; size=44mm", 24900, 1),
)

# order_id, user_id, status, payment_id, placed, item ids, cancel_reason
# (the shipping address is the user's; cancelled orders carry their refund)
ORDERS = (
    ("#R1001", "U01", "delivered", "PM01", "2024-03-02", ("1001", "2002"), None),
    ("#R1002", "U01", "pending", "PM01", "2024-05-11", ("3001",), None),
    ("#R1003", "U01", "processed", "PM02", "2024-05-09", ("5001",), None),
    ("#R1004", "U02", "pending", "PM03", "2024-05-12", ("6002", "2001"), None),
    ("#R1005", "U02", "delivered", "PM04", "2024-04-20", ("4002",), None),
    ("#R1006", "U03", "delivered", "PM05", "2024-02-14", ("7001", "1003"), None),
    ("#R1007", "U03", "cancelled", "PM05", "2024-04-02", ("8001",), "no longer needed"),
    ("#R1008", "U03", "pending", "PM05", "2024-05-13", ("5002",), None),
    ("#R1009", "U04", "pending", "PM07", "2024-05-10", ("4001",), None),
    ("#R1010", "U04", "delivered", "PM07", "2024-03-28", ("3002", "1002"), None),
    ("#R1011", "U05", "delivered", "PM08", "2024-04-05", ("6001",), None),
    ("#R1012", "U05", "pending", "PM08", "2024-05-12", ("7002", "2003"), None),
    ("#R1013", "U06", "pending", "PM10", "2024-05-08", ("8002",), None),
    ("#R1014", "U06", "delivered", "PM09", "2024-03-15", ("5003", "5003"), None),
    ("#R1015", "U06", "processed", "PM09", "2024-05-10", ("1001",), None),
    ("#R1016", "U07", "delivered", "PM11", "2024-04-11", ("3003",), None),
    ("#R1017", "U07", "pending", "PM11", "2024-05-13", ("1001", "1003"), None),
    ("#R1018", "U08", "pending", "PM12", "2024-05-12", ("2001",), None),
    ("#R1019", "U08", "delivered", "PM12", "2024-04-01", ("4004",), None),
    ("#R1020", "U09", "delivered", "PM14", "2024-03-30", ("7003", "6003"), None),
    ("#R1021", "U09", "pending", "PM14", "2024-05-11", ("8003",), None),
    ("#R1022", "U10", "pending", "PM16", "2024-05-13", ("3001",), None),
    ("#R1023", "U10", "delivered", "PM15", "2024-04-18", ("2002", "2003"), None),
    ("#R1024", "U10", "cancelled", "PM15", "2024-04-25", ("5001",), "ordered by mistake"),
    ("#R1025", "U11", "pending", "PM17", "2024-05-09", ("4002",), None),
    ("#R1026", "U11", "delivered", "PM17", "2024-04-03", ("1002",), None),
    ("#R1027", "U12", "delivered", "PM18", "2024-04-22", ("6002",), None),
    ("#R1028", "U12", "pending", "PM18", "2024-05-12", ("7001", "5002"), None),
)


def build_seed_database(conn: sqlite3.Connection) -> None:
    """Create the schema and insert every row into ``conn`` (an empty database)."""
    prices = {item[0]: item[3] for item in ITEMS}
    users = {u[0]: u for u in USERS}
    with conn:
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?, ?, ?, ?)", USERS)
        conn.executemany("INSERT INTO payment_methods VALUES (?, ?, ?, ?, ?)", PAYMENT_METHODS)
        conn.executemany("INSERT INTO products VALUES (?, ?)", PRODUCTS)
        conn.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?)", ITEMS)
        for order_id, user_id, status, payment_id, placed, item_ids, reason in ORDERS:
            _, _, _, _, address1, city, state, zip_code = users[user_id]
            conn.execute(
                "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
                (order_id, user_id, status, address1, city, state, zip_code, payment_id, placed, reason),
            )
            conn.executemany(
                "INSERT INTO order_items (order_id, line, item_id, price_cents) VALUES (?, ?, ?, ?)",
                [(order_id, i + 1, item, prices[item]) for i, item in enumerate(item_ids)],
            )
            total = sum(prices[item] for item in item_ids)
            conn.execute(
                "INSERT INTO transactions VALUES (?, ?, 'payment', ?)", (order_id, payment_id, total)
            )
            if status == "cancelled":
                conn.execute(
                    "INSERT INTO transactions VALUES (?, ?, 'refund', ?)",
                    (order_id, payment_id, total),
                )
