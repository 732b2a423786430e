-- name: inside
SELECT 1;
