-- name: outside
SELECT 1;
