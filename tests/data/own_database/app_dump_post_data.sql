--
-- PostgreSQL database dump
--

\restrict Rk4zvpnbdd8Wdanc8GLR51bSDzYnK6yMRmCmySyUwHbbq5aby6Lc9usKbkeyXmS

-- Dumped from database version 18.6
-- Dumped by pg_dump version 18.6

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET transaction_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

--
-- Name: customers customers_pkey; Type: CONSTRAINT; Schema: public; Owner: blocklab
--

ALTER TABLE ONLY public.customers
    ADD CONSTRAINT customers_pkey PRIMARY KEY (id);


--
-- Name: order_lines order_lines_pkey; Type: CONSTRAINT; Schema: public; Owner: blocklab
--

ALTER TABLE ONLY public.order_lines
    ADD CONSTRAINT order_lines_pkey PRIMARY KEY (order_id, line);


--
-- Name: orders orders_pkey; Type: CONSTRAINT; Schema: public; Owner: blocklab
--

ALTER TABLE ONLY public.orders
    ADD CONSTRAINT orders_pkey PRIMARY KEY (id);


--
-- Name: products products_pkey; Type: CONSTRAINT; Schema: public; Owner: blocklab
--

ALTER TABLE ONLY public.products
    ADD CONSTRAINT products_pkey PRIMARY KEY (id);


--
-- Name: customers_country; Type: INDEX; Schema: public; Owner: blocklab
--

CREATE INDEX customers_country ON public.customers USING btree (country);


--
-- Name: order_lines_product; Type: INDEX; Schema: public; Owner: blocklab
--

CREATE INDEX order_lines_product ON public.order_lines USING btree (product_id);


--
-- Name: orders_customer_placed; Type: INDEX; Schema: public; Owner: blocklab
--

CREATE INDEX orders_customer_placed ON public.orders USING btree (customer_id, placed_at);


--
-- Name: orders_placed; Type: INDEX; Schema: public; Owner: blocklab
--

CREATE INDEX orders_placed ON public.orders USING btree (placed_at);


--
-- Name: order_lines order_lines_order_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: blocklab
--

ALTER TABLE ONLY public.order_lines
    ADD CONSTRAINT order_lines_order_id_fkey FOREIGN KEY (order_id) REFERENCES public.orders(id);


--
-- Name: order_lines order_lines_product_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: blocklab
--

ALTER TABLE ONLY public.order_lines
    ADD CONSTRAINT order_lines_product_id_fkey FOREIGN KEY (product_id) REFERENCES public.products(id);


--
-- Name: orders orders_customer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: blocklab
--

ALTER TABLE ONLY public.orders
    ADD CONSTRAINT orders_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES public.customers(id);


--
-- PostgreSQL database dump complete
--

\unrestrict Rk4zvpnbdd8Wdanc8GLR51bSDzYnK6yMRmCmySyUwHbbq5aby6Lc9usKbkeyXmS

