-- A small shop's database for examples/own-database-pagesize.toml: made from
-- generate_series, so anyone can make it offline (make_dump.py), about 60 MB restored
-- at :rows = 1 (a unit is 10,000 customers, 100,000 orders, 300,000 order lines).
\if :{?rows}
\else
  \set rows 1
\endif
CREATE TABLE customers (
  id        bigint PRIMARY KEY,
  name      text NOT NULL,
  country   text NOT NULL,
  signed_up date NOT NULL
);
CREATE TABLE products (
  id       int PRIMARY KEY,
  title    text NOT NULL,
  category text NOT NULL,
  price    numeric(10, 2) NOT NULL
);
CREATE TABLE orders (
  id          bigint PRIMARY KEY,
  customer_id bigint NOT NULL REFERENCES customers,
  placed_at   timestamptz NOT NULL,
  status      text NOT NULL
);
CREATE TABLE order_lines (
  order_id   bigint NOT NULL REFERENCES orders,
  line       int NOT NULL,
  product_id int NOT NULL REFERENCES products,
  quantity   int NOT NULL,
  PRIMARY KEY (order_id, line)
);
INSERT INTO customers
SELECT i, 'customer ' || i, (ARRAY['de', 'fr', 'it', 'es', 'nl', 'pl', 'se'])[1 + i % 7],
       date '2015-01-01' + (i * 7919 % 3650)::int
FROM generate_series(1::bigint, 10000 * :rows) i;
INSERT INTO products
SELECT i, 'product ' || i, 'category ' || (i % 40), (i * 37 % 10000) / 100.0 + 1
FROM generate_series(1, 2000) i;
INSERT INTO orders
SELECT i, 1 + (i * 104729 % (10000 * :rows)),
       timestamptz '2020-01-01' + (i * 2654435761 % 157680000) * interval '1 second',
       (ARRAY['new', 'paid', 'shipped', 'returned'])[1 + i % 4]
FROM generate_series(1::bigint, 100000 * :rows) i;
INSERT INTO order_lines
SELECT o, l, 1 + ((o * 31 + l * 17) % 2000), 1 + (o + l) % 5
FROM generate_series(1::bigint, 100000 * :rows) o, generate_series(1, 3) l;
CREATE INDEX orders_customer_placed ON orders (customer_id, placed_at);
CREATE INDEX orders_placed ON orders (placed_at);
CREATE INDEX order_lines_product ON order_lines (product_id);
CREATE INDEX customers_country ON customers (country);
