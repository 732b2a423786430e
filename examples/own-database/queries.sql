-- The queries of examples/own-database-pagesize.toml: one statement per `;`, each
-- named by the `-- name:` line before it (else q1, q2, ... by position). A `-- params:
-- FILE.csv` line runs its statement once per row of the CSV (beside this file), the
-- row's values as $1, $2, ...: customer_orders below, for 5 customers per pass.

-- name: point_lookup
SELECT * FROM customers WHERE id = 4242;

-- name: customer_orders
-- params: customer_ids.csv
SELECT o.id, o.placed_at, o.status
FROM orders o WHERE o.customer_id = $1 ORDER BY o.placed_at DESC LIMIT 20;

-- name: range_scan
SELECT count(*), min(placed_at), max(placed_at)
FROM orders WHERE placed_at >= '2021-03-01' AND placed_at < '2021-03-08';

-- name: revenue_by_country
SELECT c.country, sum(l.quantity * p.price) AS revenue
FROM orders o
JOIN customers c ON c.id = o.customer_id
JOIN order_lines l ON l.order_id = o.id
JOIN products p ON p.id = l.product_id
WHERE o.status = 'paid'
GROUP BY c.country ORDER BY revenue DESC;

-- name: top_products
SELECT l.product_id, sum(l.quantity) AS sold
FROM order_lines l GROUP BY l.product_id ORDER BY sold DESC LIMIT 10;

-- name: never_ordered
SELECT count(*) FROM customers c
WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id);

-- name: full_count
SELECT count(*) FROM order_lines;

-- name: running_total
WITH daily AS (
  SELECT date_trunc('day', placed_at) AS day, count(*) AS n
  FROM orders WHERE placed_at < '2020-03-01' GROUP BY 1
)
SELECT day, n, sum(n) OVER (ORDER BY day) AS running FROM daily ORDER BY day;
